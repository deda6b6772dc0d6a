"""The Ray engine on a real local two-node cluster (``ray.cluster_utils.Cluster``: a head and a worker
node, two raylets on 127.0.0.1): killing the worker node while a grid runs loses its cells' tasks,
which are submitted again (system failures are retried) and end done; the summary counts them."""

import threading
import time

import pytest

from vistabench.engine import Engine
from vistabench.grid import grid_records, grid_status, parse_config, run_grid
from vistabench.grid.state import GridState


def test_a_lost_node_mid_grid_is_retried_and_every_cell_ends_done(toy, tmp_path):
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    fast_failure_detection = {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
                              "health_check_initial_delay_ms": 0}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "_system_config": fast_failure_detection})
    try:
        worker = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        store = tmp_path / "r.sqlite"
        cfg = parse_config({"protocol": "toy", "fixed": {"sleep": 8.0}, "grid": {"seed": [0, 1, 2, 3]}})
        result: dict = {}

        def drive():
            try:
                result["run"] = run_grid(cfg, store=store, engine=Engine(engine="ray", ray_address=cluster.address),
                                         work_dir=tmp_path / "work")
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                result["error"] = exc

        t0 = time.time()
        driver = threading.Thread(target=drive)
        driver.start()
        deadline = time.time() + 60
        work = tmp_path / "work"
        while time.time() < deadline:  # both nodes busy: two cells mid-run (begun, not ended) on their nodes
            mid_run = [d for d in work.glob("*") if (d / "started.txt").is_file() and not (d / "ran.txt").is_file()]
            if store.is_file() and len(mid_run) == 2:
                with GridState(store, read_only=True) as st:
                    if sum(r["status"] == "running" for r in st.cell_rows().values()) >= 2:
                        break
            time.sleep(0.1)
        cluster.remove_node(worker, allow_graceful=False)  # the node is lost: raylet and workers killed
        driver.join(timeout=120)
        elapsed = time.time() - t0
        assert not driver.is_alive(), "the grid did not finish after the node was lost"
        assert "error" not in result, result.get("error")
        res = result["run"]
        assert (res.cells, res.ran, res.failed) == (4, 4, 0), res
        assert res.retried == 1, res  # the cell that ran on the lost node
        assert grid_status(cfg, store=store)["done"] == 4
        recs = grid_records(cfg, store=store)
        assert sorted(r.seed for r in recs) == [0, 1, 2, 3] and len({r.grid_cell for r in recs}) == 4
        print(f"two-node grid with a lost node: {elapsed:.1f} s, retried {res.retried}")
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
