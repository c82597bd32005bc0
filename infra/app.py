"""The CDK app. `npx cdk synth` runs it as `python -m infra.app` (see cdk.json)."""

from __future__ import annotations

import os

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from infra.settings import DeploySettings
from infra.stack import PunctualStack


def build(app: App) -> PunctualStack:
    """Add the Punctual stack, configured by the app's context, with cdk-nag's checks."""
    settings = DeploySettings.from_context(app.node.try_get_context)
    stack = PunctualStack(
        app,
        settings.stack_name,
        settings=settings,
        # Set by the CDK CLI from the caller's credentials; unset, the template is environment-agnostic.
        env=Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
        ),
    )
    Tags.of(stack).add("app", "punctual")
    add_checks(app)
    return stack


def add_checks(app: App) -> None:
    """cdk-nag's AwsSolutions pack: any finding not acknowledged (with its reason) fails synthesis."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))


def main() -> None:
    app = App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
