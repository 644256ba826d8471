"""From messages to synchronised, filtered samples: the gatherer stage
(:mod:`.gatherer`), its filter choice and revisit, the wrench-delay estimate,
the stamp policy and the synchroniser (:mod:`.synchronizer`)."""
