"""API Gateway: IAM authorization on every method, throttling, access logs, tracing."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

from scripts import smoke


def test_every_method_requires_iam_authorization(synthesized):
    methods = synthesized.of_type("AWS::ApiGateway::Method")
    # the root and the {proxy+} resource, any HTTP method
    assert len(methods) == 2
    for method in methods.values():
        props = method["Properties"]
        assert props["AuthorizationType"] == "AWS_IAM"
        assert props["HttpMethod"] == "ANY"
        assert props["Integration"]["Type"] == "AWS_PROXY"
    (resource,) = synthesized.of_type("AWS::ApiGateway::Resource").values()
    assert resource["Properties"]["PathPart"] == "{proxy+}"


def test_methods_invoke_the_api_function(synthesized):
    api, _ = synthesized.function("api")
    for method in synthesized.of_type("AWS::ApiGateway::Method").values():
        assert api in str(method["Properties"]["Integration"]["Uri"])


def test_stage_is_throttled_logged_and_traced(synthesized, template: Template):
    access_logs = synthesized.logical_id("AWS::Logs::LogGroup", "ApiAccessLogs")
    template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "TracingEnabled": True,
            "AccessLogSetting": {
                "DestinationArn": {"Fn::Join": ["", Match.array_with([{"Ref": access_logs}])]},
                "Format": Match.string_like_regexp(r"\$context\.requestId"),
            },
            "MethodSettings": [
                Match.object_like(
                    {
                        "HttpMethod": "*",
                        "ResourcePath": "/*",
                        "ThrottlingRateLimit": 50,
                        "ThrottlingBurstLimit": 100,
                        "LoggingLevel": "ERROR",
                        "DataTraceEnabled": False,
                    }
                )
            ],
        },
    )


def test_access_logs_record_the_calling_principal(synthesized):
    (stage,) = synthesized.of_type("AWS::ApiGateway::Stage").values()
    log_format = stage["Properties"]["AccessLogSetting"]["Format"]
    assert "$context.identity.caller" in log_format
    assert "$context.identity.user" in log_format


def test_api_url_is_an_output_the_smoke_script_reads(synthesized):
    outputs = synthesized.template["Outputs"]
    assert smoke.API_URL_OUTPUT in outputs
    assert "execute-api" in str(outputs[smoke.API_URL_OUTPUT]["Value"])
