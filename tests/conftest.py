from hypothesis import HealthCheck, settings

# Timings on these machines are noisy: property tests check behaviour, never speed.
settings.register_profile("shapeloop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shapeloop")
