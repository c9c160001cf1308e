"""Jobs over a log besides appending: publishing and exporting its tiles, the scrub and the
full check, getting checkpoints witnessed, and the lease that keeps each job to one process."""
