"""Files in and out: bags (reading, writing, the fast CDR of the messages), saved
calibrations and URDF ``<inertial>`` blocks, joint-state recordings for the
joint-torque commands. No ROS node here; the maths is in :mod:`inertial_id.core`."""
