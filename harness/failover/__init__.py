"""A PostgreSQL that fails over: a three-member Patroni cluster on etcd
(`cluster.py`), and the reliability run's faults for it (`faults.py`)."""
