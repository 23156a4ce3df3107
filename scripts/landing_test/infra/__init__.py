"""scripts/test-infra: the deployment files (Dockerfile, k8s/, terraform/) tested for
real. main.py runs the checks; each other module holds a group of them, and the
programs they run with the infra venv's interpreter are files in ../programs/."""
