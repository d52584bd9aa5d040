"""Metrics (CloudWatch EMF) and optional X-Ray tracing, for ltm on Lambda.

Metrics, namespace ``POWERTOOLS_METRICS_NAMESPACE`` (``ltm``), dimension
``service``, one count per request that is:

- ``Pushes``: a packet stored (``POST /v1/packets`` answered 201);
- ``Pulls``: a packet read (``GET /v1/packets/{id}`` answered 200);
- ``AuthFailures``: any request answered 401 (no token, unknown or revoked).

They are written as Embedded Metric Format lines on stdout, which Lambda
sends to CloudWatch Logs, where CloudWatch turns them into metrics: no API
call, no extra latency, nothing at idle. Only on Lambda (or with
``LTM_METRICS=1``): a self-hosted server's stdout stays quiet. Nothing but
the counts and the service name is written.

Tracing: the stage's ``"xray": true`` in ``.chalice/config.json`` traces each
invocation (Lambda and API Gateway segments) with no code at all. For a
subsegment per DynamoDB call, add ``aws-xray-sdk`` to ``requirements.txt``
and set ``LTM_TRACING=1``: powertools' Tracer then patches botocore. Without
the SDK the setting logs one warning and the app runs untraced.
"""

from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger(__name__)

# (method, API Gateway resource path, status) -> metric
_COUNTED = {
    ("POST", "/v1/packets", 201): "Pushes",
    ("GET", "/v1/packets/{id}", 200): "Pulls",
}

_metrics: Any = None
_tracer: Any = None


def metrics_enabled() -> bool:
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")) or os.environ.get("LTM_METRICS") == "1"


def _get_metrics() -> Any:
    global _metrics
    if _metrics is None:
        from aws_lambda_powertools import Metrics

        _metrics = Metrics(
            namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "ltm"),
            service=os.environ.get("POWERTOOLS_SERVICE_NAME", "ltm"),
        )
    return _metrics


def metric_for(method: str, resource: str | None, status: int) -> str | None:
    if status == 401:
        return "AuthFailures"
    return _COUNTED.get((method.upper(), resource or "", status))


def request_done(method: str, resource: str | None, status: int) -> None:
    """Count the request if it is one of the metrics above (on Lambda only)."""
    name = metric_for(method, resource, status)
    if name is None or not metrics_enabled():
        return
    try:
        from aws_lambda_powertools.metrics import MetricUnit

        metrics = _get_metrics()
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
        metrics.flush_metrics()
    except Exception:  # a metric must never fail a request
        log.warning("could not write the %s metric", name, exc_info=True)


def start_tracing() -> None:
    """With ``LTM_TRACING=1``: trace DynamoDB calls as X-Ray subsegments (needs aws-xray-sdk)."""
    global _tracer
    if os.environ.get("LTM_TRACING") != "1" or _tracer is not None:
        return
    try:
        import aws_xray_sdk  # noqa: F401 - only to know whether it is there
        from aws_lambda_powertools import Tracer
    except ImportError:
        log.warning("LTM_TRACING=1 but aws-xray-sdk is not installed; tracing stays off")
        return
    _tracer = Tracer(
        service=os.environ.get("POWERTOOLS_SERVICE_NAME", "ltm"), patch_modules=["botocore"]
    )


def install(app: Any) -> None:
    """Count each request (see above) from an HTTP middleware, and start tracing if asked."""
    start_tracing()

    @app.middleware("http")
    def _count(event: Any, get_response: Any) -> Any:
        response = get_response(event)
        context = event.context or {}
        request_done(event.method, context.get("resourcePath"), response.status_code)
        return response
