"""Punctual's AWS CDK app: one stack, composed of one construct per concern."""
