"""The ``reliability`` benchmark (``python -m dynid_ros.reliability``): nothing lost, nothing
silent.

``feed`` runs the recorder and the streams fed to it and reads what reached the disk, ``runs``
the long run and the kill -9 trials, ``corpus`` the damaged bags fitted with ``dynid fit``.
"""
