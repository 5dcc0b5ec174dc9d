"""Names and ids are printable UTF-8: invisible format characters (Unicode category Cf: zero
width spaces, bidi overrides) are refused like control characters, because 'A1' and
'A1' + U+200B would be two projects that print alike, and U+202E reverses what a terminal
shows. Accents and CJK stay valid."""

from __future__ import annotations

import pytest

from optalloc.cli import main

CONFIG = """gpu_types: [{{name: h100}}]
nodes: [{{name: box, gpu_type: h100, gpus: 4}}]
org: {{name: lab, children: [{{name: "{a}"}}, {{name: "{b}"}}]}}
"""


@pytest.mark.parametrize("a, b, code", [("A1", "A1\u200b", "U+200B"),
                                        ("A1", "evil\u202e1A", "U+202E")])
def test_validate_refuses_a_project_name_with_an_invisible_format_character(
        tmp_path, capsys, a, b, code):
    (tmp_path / "cfg.yaml").write_text(CONFIG.format(a=a, b=b), encoding="utf-8")
    assert main(["validate", str(tmp_path / "cfg.yaml")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "cfg.yaml" in err and "org.children[1].name" in err and code in err, err
    assert "invisible format characters" in err


def test_validate_keeps_accented_and_cjk_project_names_valid(tmp_path, capsys):
    (tmp_path / "cfg.yaml").write_text(CONFIG.format(a="équipe", b="名前"), encoding="utf-8")
    assert main(["validate", str(tmp_path / "cfg.yaml")]) == 0, capsys.readouterr().err
