"""metrics/ shows the daemon's existing state as Prometheus metrics, built at
scrape time on the metrics server's thread: nothing on a request path writes
here, so serving ``/metrics`` costs inference nothing but a snapshot's lock.
The custom metrics python models count themselves (``pb_utils.MetricFamily``)
live beside their writer, in ``backends/python/custom_metrics/``, and are read
from there like the rest. Triton's names, labels and help texts where Triton
has the metric (so Triton's Grafana dashboards work), edgebox's own under
``edgebox_``."""
