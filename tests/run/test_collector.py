import gc
import weakref

import pytest

from storbench.run import collector


@pytest.fixture
def restored_collector():
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_planning_collects_sparsely_then_the_campaign_as_usual(restored_collector):
    collector.collect_sparsely_while_planning()
    assert gc.get_threshold() == (100_000, 50, 100)
    built = [[index] for index in range(1000)]  # objects the DAG would hold
    collector.collect_as_usual_from_the_start()
    assert gc.get_threshold() == collector.DEFAULT_THRESHOLDS == (700, 10, 10)
    assert gc.get_freeze_count() >= len(built)
    assert gc.isenabled()


def test_planning_garbage_is_collected_not_frozen(restored_collector):
    collector.collect_sparsely_while_planning()

    class Cycle:
        pass

    cycle = Cycle()
    cycle.itself = cycle
    found = weakref.ref(cycle)
    del cycle  # garbage only the collector finds: under 100,000 new objects it would wait
    assert found() is not None
    collector.collect_as_usual_from_the_start()
    assert found() is None
