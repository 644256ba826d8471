"""Identification on demand: plan a short exciting motion from where the arm stands, check it
against the bounds before anything moves, watch it while it runs, and the simulated arm that
follows such a motion (:mod:`.path`, :mod:`.planning`, :mod:`.checks`, :mod:`.tracking`)."""
