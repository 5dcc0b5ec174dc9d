"""The configuration reference in the README is a real, valid config (docs that cannot rot)."""

import re
from pathlib import Path

from optalloc.config import parse_config
import yaml

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_yaml_reference_validates_and_means_what_its_comments_say():
    text = README.read_text()
    block = re.search(r"```yaml\n(gpu_types:.*?)```", text, re.S).group(1)
    config, extras = parse_config(yaml.safe_load(block), "README.md")
    assert extras == {}
    assert [n.name for n in config.nodes][:2] == ["h100-001", "h100-002"] and len(config.nodes) == 129
    assert config.nodes[-1].state.value == "drain"
    (job,) = config.jobs
    assert (job.gpus, job.gpus_per_node, job.min_runtime_s, job.running) == (16, 8, 7200.0, True)
    assert config.policy.solver.backend == "highs" and config.policy.lookback_s == 7 * 86400
