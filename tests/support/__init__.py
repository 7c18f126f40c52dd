"""Helpers shared by the test suites, imported as `tests.support.<module>`; no tests here.

    postgres          a throwaway PostgreSQL server (and the `postgres_server_session` fixture)
    loopback_cluster  a real multi-node Ray cluster on 127.0.0.1 (also used by benchmarks/bench_measure.py)
    measure_kernels   hand-written C/CUDA kernels planted into the measure layer
    sched_helpers     ops, named schedules and numpy checks for the schedule/lowering/codegen tests
    sched_fuzz        random schedules for the property test
    sim_objectives    simulated tuning objectives for the searcher tests
    recording         a measurer that records the order of measured candidates
    gpu_helpers       GPU workloads, a CPU emulation of GPU nests, Triton under the interpreter
    db_test_helpers   record builders for the tuning_db tests
    service_helpers   a real API server (`autosched serve`) for the service tests
"""
