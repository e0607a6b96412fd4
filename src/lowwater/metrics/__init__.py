"""What a job did, batch by batch: the metrics log, the accounting of every record, and
dead-letter summaries. Below the runtimes, which write them, and :mod:`lowwater.observe`,
which presents them."""
