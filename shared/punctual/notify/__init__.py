"""Job notifications: a job's `notify` rules say where to tell of its executions' events.

Delivery is at least once and never holds up an execution. The worker (or the dead-letter handler)
records the execution's outcome first, then sends one message per rule and event to the stack's
notification queue (`Outbox`); a failure to send makes the work message come back, and the outcome,
recorded already, is not written twice, while its notifications are sent again. The notifier function
consumes that queue (`Notifier`): it calls the webhook (signed when the job has a signing secret),
publishes to the SNS topic or puts the event on the EventBridge bus, and keeps what happened on the
execution's item (`Delivery`: delivered, retrying or failed, with attempts and the last error).
A failed attempt that another could cure (a network error, 408, 429, 5xx, throttling) comes back after
`RETRY_DELAYS` by the message's visibility, up to `MAX_ATTEMPTS` over about eleven hours; other
answers fail the delivery at once. A receiver de-duplicates on `webhook-id` (or the payload's `id`):
one message per execution and event, whichever rule and attempt carried it.

What is sent (the rules checked, the events, the payload, the `Outbox`) is in messages.py, which the
worker needs; its delivery (`Notifier`) in delivery.py, which only the notifier function runs; execution
events on EventBridge in execution_events.py.
"""
