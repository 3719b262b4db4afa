"""The shared server's side: access roles and the job manager."""
