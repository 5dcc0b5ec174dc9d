"""Config and solver agree on one list of backend names."""

from optalloc.config.policy import SOLVER_BACKENDS
from optalloc.solve import BACKENDS


def test_every_backend_a_config_may_name_exists_and_every_backend_can_be_named():
    assert set(SOLVER_BACKENDS) == set(BACKENDS)
