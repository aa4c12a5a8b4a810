"""The sections of the HTML report and the escaped pieces they are built from.

- `parts`: escaping (`e`), inlined figures (`img`), tables and values.
- `evidence`: each finding with the figure of its evidence.
- `firewall`: the firewall's violations, on a timeline and in a table.
- `trials`: the remedies tried, as small multiples.

`tfguard.diagnose._report.html_page` puts them on one page, with the
sweep's comparison (`tfguard.diagnose._report.compare`).

Example:

>>> from tfguard.diagnose._report.html.parts import e
>>> e("<script>")
'&lt;script&gt;'
"""
