"""Test doubles shared by the tests and the benchmarks (never bundled into the Lambda asset, which
holds `punctual` alone): an in-memory DynamoDB speaking the wire protocol (`fake_dynamodb`, its
expressions and its request units), and the botocore hook that routes clients to it and to an
in-memory SQS (`fake_aws`)."""
