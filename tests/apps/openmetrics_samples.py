"""Parses the OpenMetrics text in the file named by argv[1] with prometheus_client's parser
(the reference implementation's rules: a sample outside its family, a bad escape or a
missing `# EOF` is an error) and prints every sample as one JSON object per line:
{"family": ..., "type": ..., "name": ..., "labels": {...}, "value": ...}.
With argv[2] = "prometheus", the text is Prometheus's 0.0.4 format, read by its parser.

Used by tests/scenarios/control/status.rs and metrics.rs; exits 1 with the parser's
message on bad input.
"""

import json
import sys

if sys.argv[2:] == ["prometheus"]:
    from prometheus_client.parser import text_string_to_metric_families
else:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

with open(sys.argv[1], encoding="utf-8") as source:
    text = source.read()
try:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            print(json.dumps({
                "family": family.name,
                "type": family.type,
                "name": sample.name,
                "labels": sample.labels,
                "value": sample.value,
            }))
except ValueError as err:
    print("not valid OpenMetrics: %s" % err, file=sys.stderr)
    sys.exit(1)
