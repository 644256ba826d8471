"""Every parameter of every node and mode in one table (:mod:`.table`), what a
parameter is and how it is checked (:mod:`.spec`), and the core's settings built
from the values (:mod:`.settings`): the nodes, replay, batch and tune read them
from here."""
