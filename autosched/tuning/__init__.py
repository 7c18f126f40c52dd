"""The tuner loop, the task scheduler, candidate making, transfer, and the public tune API."""
