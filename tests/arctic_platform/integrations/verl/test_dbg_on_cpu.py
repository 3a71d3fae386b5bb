def test_x(compose_arctic):
    from hydra.core.global_hydra import GlobalHydra
    print("GH", GlobalHydra.instance().is_initialized())
    cfg = compose_arctic(["remote_backend.arctic.backend.type=cortex"])
    print("OK1")
    cfg = compose_arctic(["remote_backend.arctic.backend.type=cortex"])
    print("OK2")
