"""From messages to synchronised, filtered samples: the gatherer stage
(:mod:`.gatherer`), its filter choice and revisit, the wrench-delay estimate,
the stamp policy, the synchroniser (:mod:`.synchronizer`) and when the node's batches
leave (:mod:`.pacing`)."""
