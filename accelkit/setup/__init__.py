"""`accelkit setup <backend>`: a backend's test image (the torch under test plus accelkit),
built once per content and verified inside (image.py). Inside the image's build stage,
accelkit.incontainer.image_install does the installing."""
