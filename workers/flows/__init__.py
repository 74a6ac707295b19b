"""What a job does, top to bottom: fix, review, and the edit steps they share."""
