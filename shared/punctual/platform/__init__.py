"""What every stage stands on: configuration, the clock, ids, time formats, observability, AWS clients,
the resources and their limits, signatures and the ARN allow-lists."""
