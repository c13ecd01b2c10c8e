"""`accelkit setup <backend>`: a backend's test image (the torch under test plus accelkit),
built once per content and verified inside (image.py). In the image's install step,
accelkit.incontainer.fetch_inputs downloads the install inputs the host serves
(accelkit.containers.build_inputs) and accelkit.incontainer.image_install installs them."""
