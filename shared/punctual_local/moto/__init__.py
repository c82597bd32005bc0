"""What makes moto a store the local stack can rely on: fast, atomic and durable (README.md here)."""
