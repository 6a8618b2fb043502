"""``pylog``: the command line for pylog (and any Kafka) clusters.

    pylog topics create events --partitions 6 --config retention.ms=86400000
    pylog produce events --file data.txt --key-separator ,
    pylog consume events --from-beginning --format json --max-messages 10
    pylog offsets events --time 2024-05-01T00:00:00Z
    pylog cluster describe

Verbs mirror Kafka's tools (``kafka-topics``, ``kafka-console-producer``,
``kafka-console-consumer``, ``kafka-get-offsets``). Modules: ``app`` (parser, dispatch, exit
codes), ``context`` (client config and clients), ``errors``, ``parsing`` (pure value parsing),
``output`` (tables, text, JSON), one module per command. Importing this package never imports
pyspark, and rich only when a table or progress bar is drawn.
"""

from __future__ import annotations

from pyspark_log.cli.app import main

__all__ = ["main"]
