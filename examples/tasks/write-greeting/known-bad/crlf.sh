#!/bin/bash
printf 'Hello, rollout!\r\nRewards are earned.\r\n' > /app/greeting.txt
