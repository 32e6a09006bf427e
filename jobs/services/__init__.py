"""Services: the only writers of jobs, attempts and GPU bindings."""
