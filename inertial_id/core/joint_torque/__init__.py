"""Arms without a wrist F/T sensor: the link model and its friction, link
identification (:mod:`.links`), the payload from joint torques
(:mod:`.torque_payload`), excitation, DH models, the simulated
motor-current arm and friction trends over a fleet's recordings."""
