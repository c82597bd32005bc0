"""The API's routes, one module a resource, each on its own Router; app.py includes them in this
order (the order the OpenAPI document lists them in)."""

from punctual.api.routes import coming_up, dead_letters, executions, jobs, schedules, tasks

ROUTERS = (
    jobs.router,
    executions.router,
    dead_letters.router,
    schedules.router,
    tasks.router,
    coming_up.router,
)
