"""What a running process of ours needs whatever it serves: directory locks, 0600 key files,
crash-safe file replacement, log output, progress, HOST:PORT, exit codes and the version."""
