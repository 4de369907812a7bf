"""A driver refuses a cluster of another version, naming both."""

import pytest

import manta
from manta import _core


def test_a_version_mismatch_is_refused_with_both_versions(start_cluster):
    cluster = start_cluster(num_cpus=1)
    manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
    assert _core.kv_get(_core.CLUSTER_KV_NAMESPACE, _core.VERSION_KEY.encode()) == _core.VERSION.encode()
    _core.kv_put(_core.CLUSTER_KV_NAMESPACE, _core.VERSION_KEY.encode(), b"0.0.1", True)
    manta.shutdown()
    with pytest.raises(RuntimeError) as info:
        manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
    assert _core.VERSION in str(info.value) and "0.0.1" in str(info.value)
    assert not manta.is_initialized()
