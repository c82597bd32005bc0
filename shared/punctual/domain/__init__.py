"""The domain: jobs, executions and their statuses, schedules (cron), policies, checks and errors.

Plain data and rules: nothing here calls AWS or reads the clock."""
