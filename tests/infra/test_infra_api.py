"""API Gateway: IAM authorization on every route, throttling, access logs; an HTTP API by default,
a REST API (traced) with `api_type=rest`."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match, Template

from scripts import smoke

# ------------------------------------------------------------ HTTP API (default)


def test_the_default_api_is_an_http_api_and_no_rest_api(synthesized):
    (api,) = synthesized.of_type("AWS::ApiGatewayV2::Api").values()
    assert api["Properties"]["ProtocolType"] == "HTTP"
    assert api["Properties"]["Name"] == f"{synthesized.stack_name}-api"
    assert synthesized.of_type("AWS::ApiGateway::RestApi") == {}
    assert synthesized.of_type("AWS::ApiGateway::Account") == {}  # no account-wide logging role


def test_every_http_route_requires_iam_authorization(synthesized):
    routes = synthesized.of_type("AWS::ApiGatewayV2::Route")
    # the root and {proxy+} (which needs at least one segment), any HTTP method
    assert sorted(r["Properties"]["RouteKey"] for r in routes.values()) == ["ANY /", "ANY /{proxy+}"]
    for route in routes.values():
        assert route["Properties"]["AuthorizationType"] == "AWS_IAM"


def test_http_routes_invoke_the_api_function_with_payload_format_2(synthesized):
    api, _ = synthesized.function("api")
    (integration_id, integration), *others = synthesized.of_type("AWS::ApiGatewayV2::Integration").items()
    assert others == []
    props = integration["Properties"]
    assert props["IntegrationType"] == "AWS_PROXY"
    assert props["PayloadFormatVersion"] == "2.0"
    assert props["IntegrationUri"] == {"Fn::GetAtt": [api, "Arn"]}
    for route in synthesized.of_type("AWS::ApiGatewayV2::Route").values():
        assert integration_id in json.dumps(route["Properties"]["Target"])
    # and API Gateway may invoke the function through either route
    permissions = [
        p["Properties"]
        for p in synthesized.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert len(permissions) == 2
    assert all(p["FunctionName"] == {"Fn::GetAtt": [api, "Arn"]} for p in permissions)


def test_http_stage_is_throttled_and_logged_as_json(synthesized, template: Template):
    access_logs = synthesized.logical_id("AWS::Logs::LogGroup", "ApiAccessLogs")
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "v1",
            "AutoDeploy": True,
            "DefaultRouteSettings": {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100},
            "AccessLogSettings": {
                "DestinationArn": {"Fn::GetAtt": [access_logs, "Arn"]},
                "Format": Match.any_value(),
            },
        },
    )
    (stage,) = synthesized.of_type("AWS::ApiGatewayV2::Stage").values()
    log_format = json.loads(stage["Properties"]["AccessLogSettings"]["Format"])
    assert log_format["requestId"] == "$context.requestId"
    # the calling principal, with the HTTP API's own variables (no REST-only ones)
    assert {"$context.identity.caller", "$context.identity.userArn", "$context.routeKey"} <= set(
        log_format.values()
    )
    assert "$context.resourcePath" not in log_format.values()


def test_throttling_follows_the_settings(unprotected):
    (stage,) = unprotected.of_type("AWS::ApiGatewayV2::Stage").values()
    assert stage["Properties"]["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": 20,
        "ThrottlingBurstLimit": 40,
    }


@pytest.mark.parametrize("stack", ["synthesized", "rest"])
def test_access_logs_keep_the_retention_and_removal_policy(request, stack):
    synthesized = request.getfixturevalue(stack)
    logs = synthesized.resources[synthesized.logical_id("AWS::Logs::LogGroup", "ApiAccessLogs")]
    assert logs["Properties"]["RetentionInDays"] == 30
    assert logs["DeletionPolicy"] == "Retain"  # deletion protection is on by default


def test_a_throwaway_stack_deletes_its_access_logs(unprotected):
    logs = unprotected.resources[unprotected.logical_id("AWS::Logs::LogGroup", "ApiAccessLogs")]
    assert logs["DeletionPolicy"] == "Delete"


def test_api_url_is_the_http_stage_url_the_smoke_script_reads(synthesized):
    http_api = synthesized.logical_id("AWS::ApiGatewayV2::Api", "ApiHttpApi")
    url = synthesized.template["Outputs"][smoke.API_URL_OUTPUT]["Value"]
    assert url == {
        "Fn::Join": [
            "",
            [
                "https://",
                {"Ref": http_api},
                ".execute-api.",
                {"Ref": "AWS::Region"},
                ".",
                {"Ref": "AWS::URLSuffix"},
                "/v1/",
            ],
        ]
    }


# ------------------------------------------------------------ REST API (api_type=rest)


def test_a_rest_stack_has_a_rest_api_and_no_http_api(rest):
    assert len(rest.of_type("AWS::ApiGateway::RestApi")) == 1
    assert rest.of_type("AWS::ApiGatewayV2::Api") == {}
    assert rest.of_type("AWS::ApiGatewayV2::Stage") == {}


def test_every_rest_method_requires_iam_authorization(rest):
    methods = rest.of_type("AWS::ApiGateway::Method")
    # the root and the {proxy+} resource, any HTTP method
    assert len(methods) == 2
    for method in methods.values():
        props = method["Properties"]
        assert props["AuthorizationType"] == "AWS_IAM"
        assert props["HttpMethod"] == "ANY"
        assert props["Integration"]["Type"] == "AWS_PROXY"
    (resource,) = rest.of_type("AWS::ApiGateway::Resource").values()
    assert resource["Properties"]["PathPart"] == "{proxy+}"


def test_rest_methods_invoke_the_api_function(rest):
    api, _ = rest.function("api")
    for method in rest.of_type("AWS::ApiGateway::Method").values():
        assert api in str(method["Properties"]["Integration"]["Uri"])


def test_rest_stage_is_throttled_logged_and_traced(rest):
    access_logs = rest.logical_id("AWS::Logs::LogGroup", "ApiAccessLogs")
    rest.assertions.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": "v1",
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


def test_rest_access_logs_record_the_calling_principal(rest):
    (stage,) = rest.of_type("AWS::ApiGateway::Stage").values()
    log_format = stage["Properties"]["AccessLogSetting"]["Format"]
    assert "$context.identity.caller" in log_format
    assert "$context.identity.user" in log_format


def test_api_url_is_the_rest_stage_url_the_smoke_script_reads(rest):
    rest_api = rest.logical_id("AWS::ApiGateway::RestApi", "ApiRestApi")
    stage = rest.logical_id("AWS::ApiGateway::Stage", "ApiRestApiDeploymentStagev1")
    url = rest.template["Outputs"][smoke.API_URL_OUTPUT]["Value"]
    assert url == {
        "Fn::Join": [
            "",
            [
                "https://",
                {"Ref": rest_api},
                ".execute-api.",
                {"Ref": "AWS::Region"},
                ".",
                {"Ref": "AWS::URLSuffix"},
                "/",
                {"Ref": stage},
                "/",
            ],
        ]
    }


# ------------------------------------------------------------ either


@pytest.mark.parametrize("stack", ["synthesized", "rest"])
def test_the_api_function_answers_within_api_gateways_integration_timeout(request, stack):
    _, props = request.getfixturevalue(stack).function("api")
    assert props["Timeout"] == 29
