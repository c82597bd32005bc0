"""The API's operations, as docs/api.md lists them: what its OpenAPI document must describe."""

OPERATIONS = frozenset(
    {
        "GET /health",
        "POST /jobs",
        "GET /jobs",
        "POST /jobs/batch",
        "GET /jobs/{job_id}",
        "PATCH /jobs/{job_id}",
        "DELETE /jobs/{job_id}",
        "POST /jobs/{job_id}/pause",
        "POST /jobs/{job_id}/resume",
        "POST /jobs/{job_id}/run",
        "GET /jobs/{job_id}/executions",
        "POST /schedules/preview",
        "GET /tasks",
        "POST /tasks",
        "GET /tasks/{name}",
        "PATCH /tasks/{name}",
        "DELETE /tasks/{name}",
        "POST /jobs/pause",
        "POST /jobs/resume",
        "POST /jobs/{job_id}/executions/{execution_id}/retry",
        "GET /dead-letters",
        "POST /dead-letters/redrive",
        "GET /coming-up",
    }
)
