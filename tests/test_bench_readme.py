"""bench/README.md shows the tables that its JSON in bench/measured/ gives (`python -m bench.render`):
a table typed or edited by hand, or JSON changed without rendering the page again, fails here."""
from bench import render


def test_bench_readme_tables_are_rendered_from_measured_json():
    committed = render.README.read_text()
    assert render.render(committed) == committed, \
        "bench/README.md differs from its JSON in bench/measured/: run `python -m bench.render`"


def test_every_marker_pair_is_closed_and_registered():
    names = render.markers(render.README.read_text())  # raises on an unclosed pair or an unknown NAME
    assert set(names) == set(render.TABLES), f"registered but not on the page: {set(render.TABLES) - set(names)}"
