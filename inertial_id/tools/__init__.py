"""The ``inertial-id`` command and its offline subcommands: replay, batch, tune,
trends, the report, simulated bags, the joint-torque and export commands. They run
the same stage objects as the nodes (:mod:`inertial_id.core.pipeline`)."""
