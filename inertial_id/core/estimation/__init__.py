"""From sensor-frame samples to a physically consistent estimate: the online
estimator stage (:mod:`.online`), the payload problem and its statistics,
the estimators and the SDP, the contact monitor (:mod:`.anomaly`), payload
changes, the set-up check and the wrench compensation."""
