"""A minimal Django 5 project served by drover through Django's ASGI handler.

Production-like: DEBUG off, a host allow-list, the CSRF middleware on, no database.
"""

from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = "drover-scenario-tests-only-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = []
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]
ROOT_URLCONF = "djangosite.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "OPTIONS": {
            "context_processors": ["django.template.context_processors.csrf"],
        },
    }
]
DATABASES = {}
USE_TZ = True

# Uploads above 1 MB go to a temporary file, as a multi-megabyte upload does on a default
# install (2.5 MB): the test exercises Django's TemporaryFileUploadHandler.
FILE_UPLOAD_MAX_MEMORY_SIZE = 1 << 20

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
