"""mqtt/ publishes to a broker; a message leaves the spool only once the broker acked it."""
