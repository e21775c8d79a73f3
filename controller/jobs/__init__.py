"""Job integrations: how kadmit reads, suspends, starts and restores each kind of batch job."""
