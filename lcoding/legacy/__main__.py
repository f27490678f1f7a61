"""``python -m lcoding.legacy`` prints the folder to put on PYTHONPATH."""
from lcoding.legacy import PATH

print(PATH)
