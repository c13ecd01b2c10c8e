"""`accelkit build`: torch wheels built in containers. Plans (plan.py) from per-backend recipes
(recipes/), their execution on the host (execute.py; the steps themselves run inside the
builder as accelkit.incontainer.build_steps), wheel checks (wheel.py), the checks of every
build flag (inputs.py) and the host's pip settings for containers (pipconfig.py).

Named `wheels`, not `build`: a package named like a build-output folder is dropped by the
common unanchored `build/` ignore rule and skipped by pytest's default `norecursedirs`.
"""
