"""The optional compiled part of pyspark-pylog (everything else is in pyproject.toml).

``pyspark_log.records._speedups`` compiles the producer's per-record loops (``send()``'s common
case, Kafka's murmur2 partitioner, the records encoder). It is optional: where no C compiler or
Python headers are found the build goes on without it and the same work is done in pure Python
(``pyspark_log/records/speedups.py``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pyspark_log.records._speedups",
            ["pyspark_log/records/_speedups.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
