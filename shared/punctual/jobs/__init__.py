"""What the API does with jobs: create, change and read them; named tasks and their parameter schemas."""
